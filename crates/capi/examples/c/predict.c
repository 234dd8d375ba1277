/* Next-word prediction from C: open the shipped PTB model with a head, read some words, print
 * the five likeliest next words. Every call's status is checked; fs_last_error() says why.
 *
 *   cc -o predict crates/capi/examples/c/predict.c -Icrates/capi/include \
 *      target/release/libfastsoftmax_c.a -lm -lpthread -ldl
 *   ./predict assets/models/ptb-small-lstm full "the company said"
 */
#include <stdio.h>
#include <stdlib.h>

#include "fastsoftmax.h"

static int fail(const char *what) {
    const char *why = fs_last_error();
    fprintf(stderr, "%s: %s\n", what, why ? why : "(no message)");
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL_DIR HEAD \"WORDS\"\n", argv[0]);
        return 2;
    }
    FsPredictor *p = fs_predictor_open(argv[1], argv[2]);
    if (!p) return fail("fs_predictor_open");
    if (fs_predictor_feed(p, argv[3]) < 0) {
        fs_predictor_free(p);
        return fail("fs_predictor_feed");
    }
    uint32_t ids[5];
    float scores[5];
    int n = fs_predictor_topk(p, 5, ids, scores);
    if (n < 0) {
        fs_predictor_free(p);
        return fail("fs_predictor_topk");
    }
    char word[64];
    for (int i = 0; i < n; i++) {
        if (fs_predictor_word(p, ids[i], word, sizeof word) < 0) {
            fs_predictor_free(p);
            return fail("fs_predictor_word");
        }
        printf("%s\t%.3f\n", word, scores[i]);
    }
    /* A bad call: k = 0 is refused with a status and a message, not a crash. */
    if (fs_predictor_topk(p, 0, ids, NULL) != FS_ERROR_ARGUMENT) {
        fs_predictor_free(p);
        fprintf(stderr, "k = 0 was accepted\n");
        return 1;
    }
    fs_predictor_free(p);
    return 0;
}
