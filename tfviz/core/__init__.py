"""The model, its switches, and the toy tasks it reads.

config (the validated dataclass), model (the Transformer and its Trace: the one forward), functional
(its stateless pieces), buffers (a traced pass's reused memory), wo (W_o
written once: modes, per-head blocks and terms), modes (the names, without torch), interventions
(every switch a forward takes, in one object), trace (a traced forward copied to numpy), packing
(real tokens side by side for batched runs), dissect (one measure swept over W_o's modes), tasks
(what a person types, and the exact answers), metrics (one vocabulary of what is measured).
This file imports nothing, so asking for tfviz.core.modes does not load torch.
"""
