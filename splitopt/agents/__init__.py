"""Device agents: ``splitopt agent`` runs on each device and measures, probes and runs
split models for a controller, which talks to them with :class:`splitopt.agents.client.AgentClient`.

* :mod:`splitopt.agents.protocol`: the messages (a versioned JSON header and binary
  blobs in one netrun frame kind), their limits and checks;
* :mod:`splitopt.agents.auth`: the shared token and the mutual HMAC challenge-response;
* :mod:`splitopt.agents.channel`: one connection of messages and the handshake on both sides;
* :mod:`splitopt.agents.addresses`: ``HOST:PORT`` and the controller's ``--agents`` list
  (inline or a JSON file with per-peer addresses);
* :mod:`splitopt.agents.server`: the agent itself (sessions, requests, refusals);
* :mod:`splitopt.agents.runtime`: the models an agent is sent (checks, per-layer
  latency, a deployed part) and the same chain run in one process;
* :mod:`splitopt.agents.wire`: a crossing tensor's packed form between agents (numpy);
* :mod:`splitopt.agents.probe`: the link probe between two agents;
* :mod:`splitopt.agents.agent_run`: one agent's side of a run (links, timing, reports);
* :mod:`splitopt.agents.client`: the controller's side of one agent;
* :mod:`splitopt.agents.chain`: deploying an export's parts and running samples
  through them on several agents;
* :mod:`splitopt.agents.model_onnx`: a model built in code as one ONNX file for
  MEASURE_LAYERS, with its layer names mapped to the instance's (needs torch, on the
  controller);
* :mod:`splitopt.agents.hardware`: the devices and links of ``splitopt profile MODEL
  --agents`` (the agents connected, the links probed, the layers measured, and where each
  number came from);
* :mod:`splitopt.agents.run_plan`: ``splitopt run INSTANCE PLAN --agents`` (a plan's parts
  exported, deployed and run on the agents, checked and measured against the evaluator);
* :mod:`splitopt.agents.testbed` (with ``testbed_spec``, ``testbed_net``,
  ``testbed_cgroups``, ``testbed_probe``): devices emulated on one machine as network
  namespaces with CPU-quota cgroups, links as ``tbf``-shaped veth pairs, for tests and
  benchmarks of the agents (``splitopt testbed up|down``).

Nothing here imports torch except :mod:`splitopt.agents.model_onnx` and the export of
:mod:`splitopt.agents.run_plan`; onnx and onnxruntime
are imported where a model is handled. Units: ms, bytes, bits/s; timeouts in seconds.
"""
