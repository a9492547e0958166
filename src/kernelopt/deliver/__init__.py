"""What the user gets: the exported, verified model (:mod:`.export`, ``kernelopt.load``)."""
