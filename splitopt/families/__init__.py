"""Problem families: one folder per family behind ``base.Family``; ``registry`` names them."""
