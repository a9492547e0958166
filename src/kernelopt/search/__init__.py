"""The ``search`` layer: candidate generation and selection (operators, policies, termination)."""
