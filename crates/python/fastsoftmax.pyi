"""The fastsoftmax engines: next-word prediction, translation and a Japanese input method.

Each class runs what the `fastsoftmax` command runs (`predict`, `translate`, `ime`); the GIL is
released while an engine computes. Errors: `OSError` for a file that cannot be read,
`ValueError` for a damaged file or a bad argument, `TypeError` for an array of the wrong dtype.
"""

from os import PathLike
from typing import List, Optional, Tuple, Union, final

import numpy as np
import numpy.typing as npt

__all__ = ["Predictor", "Translator", "Translation", "ImeSession", "__version__"]
__version__: str

_Path = Union[str, PathLike]

@final
class Predictor:
    """A language model, one of its heads, and the text read so far (from a sentence start).

    Threads: topk_batch and contexts run in parallel (the GIL released); the calls on the
    text fed (feed, topk, reset) one at a time.
    """

    def __new__(cls, model_dir: _Path, head: str = "full") -> "Predictor":
        """`head`: `full` (the exact softmax), a trained head in `model_dir/heads/NAME`
        (`l2s`, `ds`, `candidates`, ...) or a built-in one (`full-int8-m64`, ...)."""
    @property
    def vocab_size(self) -> int: ...
    @property
    def context_width(self) -> int:
        """Width d of the context vectors."""
    def word(self, id: int) -> str: ...
    def encode(self, words: str) -> npt.NDArray[np.uint32]:
        """Ids of space-separated words (<unk>'s for words outside the vocabulary)."""
    def reset(self) -> None:
        """Starts a new sentence."""
    def feed(self, words: str) -> List[str]:
        """Reads space-separated words; returns those outside the vocabulary (read as <unk>)."""
    def topk(self, k: int) -> Tuple[npt.NDArray[np.uint32], npt.NDArray[np.float32]]:
        """The k likeliest next words after the text fed: ids uint32[k], scores (logits)
        float32[k], best first."""
    def topk_batch(
        self, contexts: npt.NDArray[np.float32], k: int
    ) -> Tuple[npt.NDArray[np.uint32], npt.NDArray[np.float32]]:
        """The k likeliest words for each row of contexts float32[n, d]: ids uint32[n, k],
        scores float32[n, k]. Not for heads that read the previous words."""
    def contexts(self, words: str) -> npt.NDArray[np.float32]:
        """Context vectors float32[n, d] after each word, read from a sentence start."""

@final
class Translation:
    """One translation of a line."""

    text: str
    tokens: List[str]
    score: float
    """log_prob / len**alpha, what the beam ranks by."""
    log_prob: float

@final
class Translator:
    """A translator served as `fastsoftmax translate` serves it; many threads may share one."""

    def __new__(
        cls,
        model_dir: _Path,
        vmap: Optional[_Path] = None,
        no_vmap: bool = False,
        batch_scope: bool = False,
        head: Optional[str] = None,
    ) -> "Translator": ...
    def translate(
        self,
        lines: List[str],
        beam: int = 5,
        length_norm: float = 1.0,
        max_source_tokens: int = 250,
        replace_unk: bool = True,
        block_repeats: bool = False,
    ) -> List[str]:
        """The best translation of each line, decoded as one batch."""
    def translate_n_best(
        self,
        lines: List[str],
        n_best: int,
        beam: int = 5,
        length_norm: float = 1.0,
        max_source_tokens: int = 250,
        replace_unk: bool = True,
        block_repeats: bool = False,
    ) -> List[List[Translation]]:
        """The n_best best translations of each line, best first."""

@final
class ImeSession:
    """The Japanese input method on the shipped converter, one key at a time (Mozc's keys).

    Key names for `press`: one character, or space, enter, backspace, escape, tab, left,
    right, up, down, shift+left, shift+right, pageup, pagedown, f1-f12.
    """

    def __new__(cls, model_dir: _Path, user_dir: Optional[_Path] = None) -> "ImeSession":
        """With `user_dir`, the user's history and dictionary there are used; `save()`
        writes what was learned back."""
    def press(self, key: str) -> bool:
        """Whether the input method used the key (False: the application should have it)."""
    def keys(self, text: str) -> str:
        """Presses each character; returns what they committed."""
    def commit(self) -> str:
        """Commits what is shown, converted or not; returns it."""
    def clear(self) -> None:
        """Drops what is typed."""
    def save(self) -> None: ...
    def convert(self, kana: str, n: int = 5) -> List[str]:
        """The n best conversions of a whole reading (hiragana)."""
    @property
    def committed(self) -> str:
        """What the last key (or commit) committed ("" when nothing)."""
    @property
    def preedit(self) -> str: ...
    @property
    def segments(self) -> List[str]: ...
    @property
    def focus(self) -> Optional[int]: ...
    @property
    def candidates(self) -> List[str]:
        """The candidate window's page (empty: closed)."""
    @property
    def highlighted(self) -> Optional[int]: ...
    @property
    def suggestions(self) -> List[str]: ...
