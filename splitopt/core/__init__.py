"""The core: the instance model and its JSON form, latency and memory models, schedules, the program IR, solve options, results and errors. It imports nothing else of splitopt."""
