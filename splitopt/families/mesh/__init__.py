"""The mesh family (problem ``mesh``): layers over a device graph, a schedule whose makespan is the latency."""
