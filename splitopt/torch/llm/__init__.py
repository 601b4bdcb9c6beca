"""The llm family's torch side: profile a Hugging Face decoder built from its config into an
llm instance with times measured on this host (:mod:`splitopt.torch.llm.profile`), and run
a plan as one process per stage (:mod:`splitopt.torch.llm.run`)."""
