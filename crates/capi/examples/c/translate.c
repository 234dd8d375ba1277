/* Translation from C: open a translator as it ships, translate the lines of stdin as batches
 * of 16 at beam 5, print the best translation of each line (and, with a third argument N,
 * its N-best as `i ||| text ||| score` lines, as `fastsoftmax translate --n-best N` does).
 *
 *   cc -o translate crates/capi/examples/c/translate.c -Icrates/capi/include \
 *      target/release/libfastsoftmax_c.a -lm -lpthread -ldl
 *   head -3 data/bible/test.en | ./translate assets/models/bible-en-de-tiny
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastsoftmax.h"

#define BATCH 16

static int fail(const char *what) {
    const char *why = fs_last_error();
    fprintf(stderr, "%s: %s\n", what, why ? why : "(no message)");
    return 1;
}

/* Translates lines[0..n) and prints them; 0 or 1 (failed). */
static int flush(FsTranslator *t, char **lines, size_t n, const FsTranslateOptions *opts) {
    FsTranslations *out = NULL;
    int count = fs_translate(t, (const char *const *)lines, n, opts, &out);
    if (count < 0) return fail("fs_translate");
    for (int i = 0; i < count; i++) {
        const FsTranslation *tr = fs_translations_get(out, (size_t)i);
        if (tr->rank == 0)
            printf("%s\n", tr->text);
        else
            printf("%zu ||| %s ||| %.4f\n", tr->rank, tr->text, tr->score);
    }
    fs_translations_free(out);
    for (size_t i = 0; i < n; i++) free(lines[i]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s MODEL_DIR [N_BEST] < lines\n", argv[0]);
        return 2;
    }
    FsTranslator *t = fs_translator_open(argv[1], NULL);
    if (!t) return fail("fs_translator_open");
    FsTranslateOptions opts = fs_translate_options_default();
    if (argc == 3) opts.n_best = (size_t)atoi(argv[2]);

    char *lines[BATCH];
    size_t n = 0, cap = 0;
    char *line = NULL;
    ssize_t len;
    int status = 0;
    while (status == 0 && (len = getline(&line, &cap, stdin)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') line[len - 1] = '\0';
        lines[n++] = strdup(line);
        if (n == BATCH) {
            status = flush(t, lines, n, &opts);
            n = 0;
        }
    }
    if (status == 0 && n > 0) status = flush(t, lines, n, &opts);
    free(line);

    /* A bad call: beam 0 is refused with a status and a message, not a crash. */
    FsTranslateOptions bad = fs_translate_options_default();
    bad.beam = 0;
    FsTranslations *none = NULL;
    const char *one[] = {"x"};
    if (status == 0 && fs_translate(t, one, 1, &bad, &none) != FS_ERROR_ARGUMENT) {
        fprintf(stderr, "beam 0 was accepted\n");
        status = 1;
    }
    fs_translator_free(t);
    return status;
}
