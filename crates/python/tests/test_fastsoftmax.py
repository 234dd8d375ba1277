"""The Python module against the CLI on the shipped models: the same predictions, translations
and conversions, and every bad argument a Python exception that names it, never a crash.

Run from a venv with the wheel installed (.ci/run does):
    pytest crates/python/tests
FASTSOFTMAX_BIN names the CLI (default: target/release/fastsoftmax of this checkout).
"""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import fastsoftmax as fs

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "assets" / "models"
PTB = MODELS / "ptb-small-lstm"
BIBLE = MODELS / "bible-en-de-tiny"
IME = MODELS / "ime-ja"
BIN = os.environ.get("FASTSOFTMAX_BIN", str(ROOT / "target" / "release" / "fastsoftmax"))
JOHN = [
    "In the beginning was the Word, and the Word was with God, and the Word was God.",
    "The same was in the beginning with God.",
    "",
    "Jesus wept.",
]


def cli(*args, stdin=None):
    out = subprocess.run(
        [BIN, *map(str, args)], input=stdin, capture_output=True, text=True, check=True
    )
    return out.stdout


@pytest.fixture(scope="module")
def predictor():
    return fs.Predictor(PTB)


@pytest.fixture(scope="module")
def translator():
    return fs.Translator(BIBLE)


@pytest.fixture(scope="module")
def ime():
    return fs.ImeSession(IME)


@pytest.mark.parametrize("head", ["full", "l2s", "candidates"])
def test_predictions_are_the_clis(head):
    p = fs.Predictor(PTB, head)
    prompt = "the company said it will"
    assert p.feed(prompt) == []
    ids, scores = p.topk(5)
    assert ids.dtype == np.uint32 and scores.dtype == np.float32 and ids.shape == (5,)
    expected = [row["word"] for row in json.loads(cli("predict", "--model", PTB, "--head", head, "--json", "-k", 5, prompt))]
    assert [p.word(int(i)) for i in ids] == expected
    assert list(scores) == sorted(scores, reverse=True)
    # reset: a sentence start again
    p.reset()
    p.feed(prompt)
    assert list(p.topk(5)[0]) == list(ids)


def test_a_batch_of_contexts_is_each_contexts_topk(predictor):
    words = "the stock market fell sharply in N"
    h = predictor.contexts(words)
    assert h.shape == (len(words.split()), predictor.context_width) and h.dtype == np.float32
    ids, scores = predictor.topk_batch(h, 3)
    assert ids.shape == (h.shape[0], 3) and scores.shape == (h.shape[0], 3)
    predictor.reset()
    for i, w in enumerate(words.split()):
        predictor.feed(w)
        one_ids, one_scores = predictor.topk(3)
        assert list(one_ids) == list(ids[i])
        np.testing.assert_allclose(one_scores, scores[i], rtol=1e-6)
    # A strided view is read as the rows it shows.
    ids_odd, _ = predictor.topk_batch(h[::2], 3)
    assert (ids_odd == ids[::2]).all()
    predictor.reset()


def test_unknown_words_are_named(predictor):
    assert predictor.feed("the zyzzyvaqx") == ["zyzzyvaqx"]
    predictor.reset()


def test_predictor_bad_input_raises(predictor):
    h = predictor.contexts("the company")
    with pytest.raises(ValueError, match="k = 0"):
        predictor.topk(0)
    with pytest.raises(ValueError, match="10000"):
        predictor.topk(predictor.vocab_size + 1)
    with pytest.raises(TypeError, match="float32"):
        predictor.topk_batch(h.astype(np.float64), 3)
    with pytest.raises(TypeError, match="float32"):
        predictor.topk_batch([[0.0] * predictor.context_width], 3)
    with pytest.raises(ValueError, match="width"):
        predictor.topk_batch(h[:, :10].copy(), 3)
    bad = h.copy()
    bad[1, 3] = np.nan
    with pytest.raises(ValueError, match="(?i)nan|finite"):
        predictor.topk_batch(bad, 3)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        predictor.word(predictor.vocab_size)
    with pytest.raises(ValueError, match="nope"):
        fs.Predictor(PTB, "nope")
    with pytest.raises((OSError, ValueError), match="/no/such"):
        fs.Predictor("/no/such")
    with pytest.raises(ValueError, match="previous words"):
        fs.Predictor(PTB, "candidates").topk_batch(h, 3)


def test_translations_are_the_clis(translator):
    got = translator.translate(JOHN)
    expected = cli("translate", "--model", BIBLE, stdin="\n".join(JOHN) + "\n").splitlines()
    assert got == expected
    assert got[2] == ""


def test_n_best_is_the_clis(translator):
    nbest = translator.translate_n_best(JOHN, 3)
    lines = [json.loads(l) for l in cli("translate", "--model", BIBLE, "--n-best", 3, "--json", stdin="\n".join(JOHN) + "\n").splitlines()]
    assert len(nbest) == len(lines)
    for ours, theirs in zip(nbest, lines):
        assert [t.text for t in ours] == [t["text"] for t in theirs["translations"]]
        assert [t.tokens for t in ours] == [t["tokens"] for t in theirs["translations"]]
        for a, b in zip(ours, theirs["translations"]):
            assert a.score == pytest.approx(b["score"], abs=1e-9)
    # Greedy and without the map: still the CLI's.
    full = fs.Translator(BIBLE, no_vmap=True)
    expected = cli("translate", "--model", BIBLE, "--no-vmap", "--beam", 1, stdin="\n".join(JOHN) + "\n").splitlines()
    assert full.translate(JOHN, beam=1) == expected


def test_translator_bad_input_raises(translator):
    with pytest.raises(ValueError, match="beam size 0"):
        translator.translate(["x"], beam=0)
    with pytest.raises(ValueError, match="n-best 3"):
        translator.translate_n_best(["x"], 3, beam=2)
    with pytest.raises(TypeError):
        translator.translate("a string, not a list of lines")
    with pytest.raises(TypeError):
        translator.translate([1, 2])
    with pytest.raises((OSError, ValueError), match="ptb-small-lstm"):
        fs.Translator(PTB)  # a language model, not a translator
    with pytest.raises(ValueError, match="nope"):
        fs.Translator(BIBLE, head="nope")
    assert translator.translate([]) == []


def test_conversions_are_the_clis(ime):
    got = ime.convert("きょうはいいてんき", 3)
    out = cli("ime", "convert", "-n", 3, "きょうはいいてんき")
    expected = [l.split(". ", 1)[1].split("  (")[0] for l in out.splitlines() if l[:3].strip().rstrip(".").isdigit()]
    assert got == expected


def test_keys_convert_in_segments_and_commit(ime):
    ime.clear()
    assert ime.press("space") is False  # nothing typed: the application's
    assert ime.keys("watashinonamaeha") == ""
    assert ime.preedit == "わたしのなまえは"
    assert ime.press("space")
    assert len(ime.segments) > 1 and ime.focus == 0
    assert ime.press("space") and ime.candidates and ime.highlighted is not None
    committed = ime.commit()
    assert committed == ime.committed and committed != ""
    assert ime.preedit == "" and ime.segments == []
    assert ime.commit() == ""


def test_the_user_folder_gets_the_history_on_save(tmp_path):
    s = fs.ImeSession(IME, tmp_path)
    s.keys("kyouhaiitenki")
    assert s.commit() == "今日はいい天気"
    s.save()
    assert any(tmp_path.iterdir())
    with pytest.raises(ValueError, match="user folder"):
        fs.ImeSession(IME).save()


def test_ime_bad_input_raises(ime):
    with pytest.raises(ValueError, match="unknown key"):
        ime.press("hyper")
    with pytest.raises(ValueError, match="unknown key"):
        ime.press("f13")
    with pytest.raises(ValueError, match="unknown key"):
        ime.press("")
    with pytest.raises((OSError, ValueError)):
        fs.ImeSession(PTB)


def test_many_threads_share_a_translator(translator):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda line: translator.translate([line])[0], JOHN * 2))
    assert results == translator.translate(JOHN * 2)


def test_many_threads_share_a_predictors_batches(predictor):
    from concurrent.futures import ThreadPoolExecutor

    h = predictor.contexts("the company said it will sell its shares to the public")
    expected = predictor.topk_batch(h, 5)[0]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: predictor.topk_batch(h[i : i + 1], 5)[0][0], range(len(h))))
    assert (np.stack(results) == expected).all()


def test_an_empty_batch_is_empty(predictor):
    ids, scores = predictor.topk_batch(np.zeros((0, predictor.context_width), np.float32), 5)
    assert ids.shape == (0, 5) and scores.shape == (0, 5)
