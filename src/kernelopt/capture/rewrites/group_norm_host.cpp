// kernelopt.group_norm's host path in C++ (kernelopt.capture.rewrites.group_norm_host): a boxed kernel at the
// op's CUDA key that launches a call of a signature already planned with no Python between the dispatcher
// and the launch. A signature seen for the first time goes to kernelopt::group_norm_planned, the op's Python
// path (its checks, its plan, its fallbacks and counts), which hands a plan this kernel may launch back
// through kopt_gn_keep, kept for the signature this kernel asked it for.
//
// Built by nvcc (as host C++) against the running torch's headers; loaded by ctypes, registered with
// kopt_gn_register over Python's own CUDA kernel, which kopt_gn_unregister uncovers again.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

// the C entry point of the op's CUDA library for one dtype (group_norm_kernel.cu's kopt_group_norm)
using Launch = int (*)(const void*, void*, const void* const*, int, const int64_t*, float, int, int64_t, int64_t,
                       int64_t, int64_t, int64_t, int64_t, int, int, int64_t, float, void*, int*);
using ErrorString = const char* (*)(int);

// what a call of a planned signature hands the kernel besides its pointers, eps and epilogue numbers
// (group_norm_kernel.LaunchShape)
struct Plan {
  Launch launch;
  ErrorString error;
  int params_float;
  int64_t strides[4];
  int64_t rows, cols, hw, per_group, groups, clusters;
  int form, channels_last;
  int64_t in_flight;
};

struct KeyHash {
  size_t operator()(const std::vector<int64_t>& key) const noexcept {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the key's numbers
    for (int64_t v : key) {
      h ^= static_cast<uint64_t>(v);
      h *= 1099511628211ull;
    }
    return static_cast<size_t>(h);
  }
};

// the op's schema: x, weight, bias, groups, eps, scale, shift, scale_offset, silu, input_bias, clusters,
// form, in_flight
constexpr size_t ARGS = 13;
constexpr int TENSORS[5] = {1, 2, 5, 6, 9};  // weight, bias, scale, shift, input_bias: the kernel's order
constexpr size_t PLANS_KEPT = __PLANS_KEPT__;

std::mutex plans_mutex;
std::unordered_map<std::vector<int64_t>, Plan, KeyHash> plans;
std::atomic<int64_t> hits{0}, misses{0};
thread_local const std::vector<int64_t>* pending = nullptr;  // the signature Python's path is planning
std::string last_error;
torch::Library* registration = nullptr;  // left to the process at its exit, as torch's own are

void add_tensor(std::vector<int64_t>& key, const at::Tensor& t) {
  key.push_back(t.dim());
  for (int64_t s : t.sizes()) key.push_back(s);
  for (int64_t s : t.strides()) key.push_back(s);
  key.push_back(static_cast<int64_t>(t.scalar_type()));
}

// what a plan depends on (group_norm_op.signature's fields): each tensor's shape, strides and dtype, the
// input's device and whether it starts on a 16-byte boundary, and the arguments but eps, the offset's value
// and the SiLU (handed to every launch)
std::vector<int64_t> signature(const torch::jit::Stack& stack, size_t base) {
  std::vector<int64_t> key;
  key.reserve(64);
  const at::Tensor& x = stack[base].toTensor();
  add_tensor(key, x);
  key.push_back(x.device().index());
  key.push_back(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0);
  key.push_back(stack[base + 3].toInt());
  for (int i : TENSORS) {
    const c10::IValue& t = stack[base + i];
    if (t.isNone())
      key.push_back(-1);
    else
      add_tensor(key, t.toTensor());
  }
  key.push_back(stack[base + 7].toDouble() != 0.0);
  key.push_back(stack[base + 10].toInt());
  key.push_back(stack[base + 12].toInt());
  for (char c : stack[base + 11].toStringRef()) key.push_back(c);  // the form's name, last
  return key;
}

struct Pending {  // the signature kopt_gn_keep keeps a plan for, while Python's path runs on this thread
  explicit Pending(const std::vector<int64_t>* key) { pending = key; }
  ~Pending() { pending = nullptr; }
};

void planned_by_python(const c10::OperatorHandle&, torch::jit::Stack* stack, const std::vector<int64_t>* key) {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("kernelopt::group_norm_planned", "");
  misses.fetch_add(1, std::memory_order_relaxed);
  Pending kept(key);
  op.callBoxed(stack);
}

void group_norm_cuda(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const size_t base = stack->size() - ARGS;
  const at::Tensor& x = (*stack)[base].toTensor();
  if (c10::GradMode::is_enabled() && x.requires_grad())
    return planned_by_python(handle, stack, nullptr);  // which refuses it in one line
  const std::vector<int64_t> key = signature(*stack, base);
  Plan plan;
  bool planned = false;
  {
    std::lock_guard<std::mutex> lock(plans_mutex);
    auto found = plans.find(key);
    if (found != plans.end()) {
      plan = found->second;
      planned = true;
    }
  }
  if (!planned) return planned_by_python(handle, stack, &key);  // (not under the lock: Python keeps its plan)
  hits.fetch_add(1, std::memory_order_relaxed);
  const void* params[5];
  for (int i = 0; i < 5; ++i) {
    const c10::IValue& t = (*stack)[base + TENSORS[i]];
    params[i] = t.isNone() ? nullptr : t.toTensor().data_ptr();
  }
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty(x.sizes(), x.options().memory_format(c10::MemoryFormat::Contiguous));
  void* stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  const int error = plan.launch(
      x.data_ptr(), y.data_ptr(), params, plan.params_float, plan.strides,
      static_cast<float>((*stack)[base + 7].toDouble()), (*stack)[base + 8].toBool() ? 1 : 0, plan.rows, plan.cols,
      plan.hw, plan.per_group, plan.groups, plan.clusters, plan.form, plan.channels_last, plan.in_flight,
      static_cast<float>((*stack)[base + 4].toDouble()), stream, nullptr);
  TORCH_CHECK(error == 0, "kernelopt.group_norm launch failed: ", plan.error(error), " (CUDA error ", error, ")");
  torch::jit::drop(*stack, ARGS);
  torch::jit::push(*stack, std::move(y));
}

// the dispatcher's warning that a kernel now stands over another at a key: meant, as Python's kernel stays
// under this one (kopt_gn_unregister uncovers it); any other warning goes where it would have gone
struct OverQuiet : c10::WarningHandler {
  c10::WarningHandler* previous;
  explicit OverQuiet(c10::WarningHandler* handler) : previous(handler) {}
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("Overriding a previously registered kernel") == std::string::npos) previous->process(warning);
  }
};

}  // namespace

// the kernel registered at kernelopt::group_norm's CUDA key, over Python's (0), or why not (1,
// kopt_gn_last_error)
extern "C" int kopt_gn_register() {
  try {
    if (registration == nullptr) {
      OverQuiet quiet(c10::WarningUtils::get_warning_handler());
      c10::WarningUtils::WarningHandlerGuard guard(&quiet);
      auto* library = new torch::Library(torch::Library::IMPL, "kernelopt", c10::DispatchKey::CUDA, __FILE__, __LINE__);
      try {
        library->impl("group_norm", torch::CppFunction::makeFromBoxedFunction<&group_norm_cuda>());
      } catch (...) {
        delete library;
        throw;
      }
      registration = library;
    }
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
    return 1;
  }
}

extern "C" void kopt_gn_unregister() {
  delete registration;
  registration = nullptr;
}

extern "C" const char* kopt_gn_last_error() { return last_error.c_str(); }

// the plan Python's path made for the signature this kernel handed it (1), or nothing to keep it for (0:
// a call of Python's path not from this kernel)
extern "C" int kopt_gn_keep(void* launch, void* error, int params_float, const int64_t* strides, int64_t rows,
                            int64_t cols, int64_t hw, int64_t per_group, int64_t groups, int64_t clusters, int form,
                            int channels_last, int64_t in_flight) {
  if (pending == nullptr) return 0;
  Plan plan{reinterpret_cast<Launch>(launch), reinterpret_cast<ErrorString>(error), params_float,
            {strides[0], strides[1], strides[2], strides[3]}, rows, cols, hw, per_group, groups, clusters, form,
            channels_last, in_flight};
  std::lock_guard<std::mutex> lock(plans_mutex);
  if (plans.size() >= PLANS_KEPT) plans.clear();  // a dynamic-shape caller: start afresh, as Python's plans do
  plans[*pending] = plan;
  return 1;
}

// plans kept, calls launched here, calls handed to Python's path
extern "C" void kopt_gn_counts(int64_t* out) {
  std::lock_guard<std::mutex> lock(plans_mutex);
  out[0] = static_cast<int64_t>(plans.size());
  out[1] = hits.load();
  out[2] = misses.load();
}
