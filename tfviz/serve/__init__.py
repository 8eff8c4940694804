"""What the server does for its visitors besides drawing: jobs, lessons, tallies, exports.

jobs (one queue and one cap for all work), work (the kinds of work a job runs), checks (form and
upload values refused with a message), lessons (the guided lessons' numbers and their recipe job),
tally (a class's anonymous guesses), export (CSV text), standalone (one view as one offline web
page, with standalone.js), cache (the traces' cache, bounded by bytes), heap (the server's
garbage collection kept cheap). This file imports nothing.
"""
