"""The command lines: `python -m tfviz.cli.train` (train models), `python -m tfviz.cli.corpus`
(build the language corpus), `python -m tfviz.cli.experiment` (the with/without W_o experiment)
and `python -m tfviz.cli.atlas` (the atlas's sweep and its report)."""
