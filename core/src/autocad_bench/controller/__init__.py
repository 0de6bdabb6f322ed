"""The batch controller: execute mode, the scheduler and batch state."""
