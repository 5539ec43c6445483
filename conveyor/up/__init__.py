"""`conveyor up`: a whole worker environment on one machine, and its demo app."""
