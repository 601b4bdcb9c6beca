"""Device agents and the one-machine testbed that emulates devices and links for them."""
