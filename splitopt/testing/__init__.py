"""Testing support shipped with the package: random instance generators, hypothesis strategies, and the contract suites every family and backend gets by registering."""
