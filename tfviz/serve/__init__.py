"""What the server does for its visitors besides drawing: jobs, checks, tallies, caches.

jobs (one queue and one cap for all work), work (the kinds of work a job runs), checks (form and
upload values refused with a message), tally (a class's anonymous guesses), cache (the traces'
cache, bounded by bytes), heap (the server's garbage collection kept cheap). A lesson's numbers
and its recipe job are tfviz.lessons'; the exported web page and the CSV text, renderers of a
view, are tfviz.plots' (standalone, export). This file imports nothing.
"""
