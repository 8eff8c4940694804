"""Bring your own model: BERT, RoBERTa / XLM-R and DistilBERT encoders, GPT-2, Llama, Mistral and
Qwen2 decoders, folders in the Hugging Face layout, opened into tfviz's own Transformer (every W_o
switch and trace site works on them; a decoder runs it causally), with their masked-LM head when
they have one, and hostile folders and zips refused before anything runs.

    for found in list_folder(os.environ["TFVIZ_PRETRAINED_DIR"]):  # nothing loaded
        print(found)                             # FolderInfo, or Refused with its reason
    loaded = open_folder("models/my-bert")       # or open_zip("upload.zip")
    answer = fill_mask(loaded.model, loaded.head, loaded.tokenizer,
                       "The cat sat on the [MASK].", Interventions(w_o="identity"))

transformers is not used at runtime: weights are read with safetensors, the tokenizer with
`tokenizers`. Modules: family (the one family type), families (the key map and config reader of
each encoder family), files (which files a folder holds, JSON read safely), shards (the weights,
checked from their headers), weights (tensors into a Transformer, checked), decoders and
decoder_weights (the decoder families and their reader), causal_lm (next tokens, greedy
continuation), tokenizer, tokenizer_files (which tokenizer a folder has), mlm (the head and
fill-in-the-mask), folder (open, describe, list), zipped, errors.
"""

from tfviz.hf.causal_lm import (
    MAX_NEW_TOKENS,
    NextTokens,
    NextTokenTask,
    agreement,
    continue_greedily,
    greedy_continuation,
    next_tokens,
)
from tfviz.hf.decoders import DECODER_FAMILIES, GPT2, LLAMA, QWEN2
from tfviz.hf.errors import (
    ConfigError,
    MissingFileError,
    PretrainedError,
    TokenizerError,
    TooLargeError,
    UnknownFamilyError,
    UnreadableError,
    UnsafeFileError,
    WeightsError,
    ZipRefusedError,
)
from tfviz.hf.families import BERT, DISTILBERT, FAMILIES, ROBERTA, Family, family_of
from tfviz.hf.folder import (
    FolderInfo,
    LoadedEncoder,
    LoadedModel,
    Refused,
    describe_folder,
    list_folder,
    open_folder,
)
from tfviz.hf.mlm import MaskAnswer, MaskedLMHead, fill_mask, masked_lm_logits
from tfviz.hf.shards import MAX_PARAMS
from tfviz.hf.tokenizer import PieceTokenizer
from tfviz.hf.zipped import open_zip, unpacked

__all__ = [
    "DECODER_FAMILIES",
    "GPT2",
    "LLAMA",
    "MAX_NEW_TOKENS",
    "QWEN2",
    "NextTokens",
    "NextTokenTask",
    "agreement",
    "continue_greedily",
    "greedy_continuation",
    "next_tokens",
    "BERT",
    "DISTILBERT",
    "FAMILIES",
    "MAX_PARAMS",
    "ROBERTA",
    "ConfigError",
    "Family",
    "FolderInfo",
    "LoadedEncoder",
    "LoadedModel",
    "MaskAnswer",
    "MaskedLMHead",
    "MissingFileError",
    "PieceTokenizer",
    "PretrainedError",
    "Refused",
    "TokenizerError",
    "TooLargeError",
    "UnknownFamilyError",
    "UnreadableError",
    "UnsafeFileError",
    "WeightsError",
    "ZipRefusedError",
    "describe_folder",
    "family_of",
    "fill_mask",
    "list_folder",
    "masked_lm_logits",
    "open_folder",
    "open_zip",
    "unpacked",
]
