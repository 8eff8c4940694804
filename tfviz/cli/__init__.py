"""The command lines: `python -m tfviz.cli.train` (train models) and
`python -m tfviz.cli.experiment` (the with/without W_o experiment)."""
