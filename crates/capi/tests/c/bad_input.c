/* Bad input from C, as a C caller would make it: NULL pointers, text that is not UTF-8, k = 0
 * or beyond the vocabulary, a folder of another kind, values outside the header's enums, a
 * NaN context. Each call must return its status with a message (never crash), and every
 * *_free must take NULL. Run by tests/c_example.rs, under valgrind where installed.
 *
 *   ./bad_input PTB_MODEL BIBLE_MODEL IME_MODEL      (exit 0: every check held)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fastsoftmax.h"

static int failures = 0;

/* The call returned `got`; it should have returned `want` with a message containing `says`. */
static void expect(const char *what, int got, int want, const char *says) {
    const char *why = fs_last_error();
    if (got != want || !why || !strstr(why, says)) {
        fprintf(stderr, "FAIL %s: returned %d (want %d), message \"%s\" (want \"%s\")\n", what,
                got, want, why ? why : "(none)", says);
        failures++;
    }
}

static void expect_null(const char *what, const void *handle, const char *says) {
    expect(what, handle == NULL ? 0 : 1, 0, says);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PTB_MODEL BIBLE_MODEL IME_MODEL\n", argv[0]);
        return 2;
    }
    const char *ptb = argv[1], *bible = argv[2], *ime_dir = argv[3];
    const char not_utf8[] = {'G', (char)0xf6, 't', 'e', 0};
    uint32_t ids[8];
    float scores[8];

    /* Opening: NULL, not UTF-8, missing, another kind. */
    expect_null("predictor NULL dir", fs_predictor_open(NULL, "full"), "dir is NULL");
    expect_null("predictor NULL head", fs_predictor_open(ptb, NULL), "head is NULL");
    expect_null("predictor not UTF-8", fs_predictor_open(not_utf8, "full"), "not UTF-8");
    expect_null("predictor missing", fs_predictor_open("/no/such/model", "full"), "/no/such/model");
    expect_null("predictor of a translator", fs_predictor_open(bible, "full"), "bible-en-de-tiny");
    expect_null("predictor unknown head", fs_predictor_open(ptb, "nope"), "nope");
    expect_null("translator of a language model", fs_translator_open(ptb, NULL), "ptb-small-lstm");
    expect_null("translator NULL dir", fs_translator_open(NULL, NULL), "dir is NULL");
    expect_null("ime of a language model", fs_ime_open(ptb, NULL), "ptb-small-lstm");
    expect_null("ime not UTF-8 user dir", fs_ime_open(ime_dir, not_utf8), "user_dir is not UTF-8");

    /* The predictor. */
    FsPredictor *p = fs_predictor_open(ptb, "full");
    if (!p) {
        fprintf(stderr, "FAIL open %s: %s\n", ptb, fs_last_error());
        return 1;
    }
    expect("topk k = 0", fs_predictor_topk(p, 0, ids, scores), FS_ERROR_ARGUMENT, "k = 0");
    expect("topk k > vocabulary", fs_predictor_topk(p, 1000000, ids, scores), FS_ERROR_ARGUMENT, "vocabulary");
    expect("topk NULL ids", fs_predictor_topk(p, 5, NULL, scores), FS_ERROR_NULL, "ids is NULL");
    expect("topk NULL handle", fs_predictor_topk(NULL, 5, ids, scores), FS_ERROR_NULL, "p is NULL");
    expect("feed not UTF-8", fs_predictor_feed(p, not_utf8), FS_ERROR_UTF8, "words is not UTF-8");
    expect("word out of range", fs_predictor_word(p, 4000000000u, NULL, 0), FS_ERROR_ARGUMENT, "outside the vocabulary");
    float h[200];
    int d = fs_predictor_context(p, h, 200);
    h[7] = NAN;
    expect("batch with NaN", fs_predictor_topk_batch(p, h, 1, (size_t)d, 5, ids, NULL), FS_ERROR_ARGUMENT, "");
    expect("batch wrong width", fs_predictor_topk_batch(p, h, 1, (size_t)d + 1, 5, ids, NULL), FS_ERROR_ARGUMENT, "numbers");
    if (fs_predictor_feed(p, "the company") != 2 || fs_predictor_topk(p, 5, ids, scores) != 5) {
        fprintf(stderr, "FAIL the predictor did not go on after bad calls: %s\n", fs_last_error());
        failures++;
    }
    fs_predictor_free(p);

    /* The translator. */
    FsTranslator *t = fs_translator_open(bible, NULL);
    if (!t) {
        fprintf(stderr, "FAIL open %s: %s\n", bible, fs_last_error());
        return 1;
    }
    FsTranslations *out = NULL;
    const char *lines[] = {"Jesus wept.", not_utf8};
    FsTranslateOptions o = fs_translate_options_default();
    expect("translate not UTF-8", fs_translate(t, lines, 2, &o, &out), FS_ERROR_UTF8, "lines[1] is not UTF-8");
    expect("translate NULL out", fs_translate(t, lines, 1, &o, NULL), FS_ERROR_NULL, "out is NULL");
    expect("translate NULL lines", fs_translate(t, NULL, 1, &o, &out), FS_ERROR_NULL, "lines is NULL");
    o.n_best = 9;
    expect("translate n-best > beam", fs_translate(t, lines, 1, &o, &out), FS_ERROR_ARGUMENT, "n-best 9");
    o = fs_translate_options_default();
    o.length_norm = NAN;
    expect("translate NaN length norm", fs_translate(t, lines, 1, &o, &out), FS_ERROR_ARGUMENT, "length normalisation");
    if (out != NULL || fs_translations_get(out, 0) != NULL || fs_translations_count(out) != 0) {
        fprintf(stderr, "FAIL a failed translation left results\n");
        failures++;
    }
    fs_translator_free(t);

    /* The input method. */
    FsIme *ime = fs_ime_open(ime_dir, NULL);
    if (!ime) {
        fprintf(stderr, "FAIL open %s: %s\n", ime_dir, fs_last_error());
        return 1;
    }
    expect("key outside FsKey", fs_ime_key(ime, 99, 0), FS_ERROR_ARGUMENT, "key 99");
    expect("char not a code point", fs_ime_key(ime, FS_KEY_CHAR, 0xD800), FS_ERROR_ARGUMENT, "0xd800");
    expect("char a control", fs_ime_key(ime, FS_KEY_CHAR, '\n'), FS_ERROR_ARGUMENT, "printable");
    expect("F13", fs_ime_key(ime, FS_KEY_FUNCTION, 13), FS_ERROR_ARGUMENT, "F1");
    expect("text outside FsImeText", fs_ime_text(ime, 42, 0, NULL, 0), FS_ERROR_ARGUMENT, "what 42");
    expect("candidate of a closed window", fs_ime_text(ime, FS_IME_CANDIDATE, 0, NULL, 0), FS_ERROR_ARGUMENT, "candidate 0");
    expect("state NULL out", fs_ime_state(ime, NULL), FS_ERROR_NULL, "out is NULL");
    expect("save without a folder", fs_ime_save(ime), FS_ERROR_ARGUMENT, "user folder");
    expect("key NULL handle", fs_ime_key(NULL, FS_KEY_SPACE, 0), FS_ERROR_NULL, "ime is NULL");
    fs_ime_free(ime);

    /* Every free takes NULL. */
    fs_predictor_free(NULL);
    fs_translator_free(NULL);
    fs_translations_free(NULL);
    fs_ime_free(NULL);
    if (failures == 0) printf("every bad call was refused with its message\n");
    return failures == 0 ? 0 : 1;
}
