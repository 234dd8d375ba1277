/* The work experiments/bindings_overhead.py times through each path, here through the C ABI
 * (../overhead.rs does it through the Rust API): top-5 of PTB contexts one at a time and 64 at
 * a time, and John at beam 5 in batches of 16. Prints one JSON line of medians over the rounds.
 *
 *   ./overhead PTB_MODEL PTB_TEXT WORDS BIBLE_MODEL JOHN ROUNDS
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fastsoftmax.h"

#define K 5
#define BATCH 64
#define LINES 16

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static int fail(const char *what) {
    const char *why = fs_last_error();
    fprintf(stderr, "%s: %s\n", what, why ? why : "(no message)");
    return 1;
}

/* The lines of `path` (at most `max`), into `lines`; their number, or -1. */
static int read_lines(const char *path, char **lines, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while (n < max && (len = getline(&line, &cap, f)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') line[len - 1] = '\0';
        lines[n++] = strdup(line);
    }
    free(line);
    fclose(f);
    return n;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s PTB_MODEL PTB_TEXT WORDS BIBLE_MODEL JOHN ROUNDS\n", argv[0]);
        return 2;
    }
    int words = atoi(argv[3]), rounds = atoi(argv[6]);
    FsPredictor *p = fs_predictor_open(argv[1], "full");
    if (!p) return fail("fs_predictor_open");
    int d = fs_predictor_context(p, NULL, 0);
    float *hs = malloc(sizeof(float) * (size_t)d * (size_t)words);
    static char *text[100000];
    int n_text = read_lines(argv[2], text, 100000);
    if (n_text < 0) return fail(argv[2]);
    int n = 0;
    for (int l = 0; l < n_text && n < words; l++) {
        fs_predictor_reset(p);
        char *save = NULL;
        for (char *w = strtok_r(text[l], " ", &save); w && n < words; w = strtok_r(NULL, " ", &save)) {
            if (fs_predictor_feed(p, w) < 0) return fail("fs_predictor_feed");
            fs_predictor_context(p, hs + (size_t)n * (size_t)d, (size_t)d);
            n++;
        }
    }
    for (int l = 0; l < n_text; l++) free(text[l]);
    uint32_t ids[BATCH * K];
    float scores[BATCH * K];
    unsigned long long checksum = 0;
    double *one = malloc(sizeof(double) * (size_t)rounds), *many = malloc(sizeof(double) * (size_t)rounds);
    for (int r = 0; r < rounds; r++) {
        double t = now();
        for (int i = 0; i < n; i++) {
            if (fs_predictor_topk_batch(p, hs + (size_t)i * (size_t)d, 1, (size_t)d, K, ids, scores) < 0)
                return fail("fs_predictor_topk_batch");
            for (int j = 0; j < K; j++) checksum += ids[j];
        }
        one[r] = (now() - t) * 1e6 / n;
        t = now();
        for (int i = 0; i < n; i += BATCH) {
            int m = n - i < BATCH ? n - i : BATCH;
            if (fs_predictor_topk_batch(p, hs + (size_t)i * (size_t)d, (size_t)m, (size_t)d, K, ids, scores) < 0)
                return fail("fs_predictor_topk_batch");
            for (int j = 0; j < m * K; j++) checksum += ids[j];
        }
        many[r] = (now() - t) * 1e6 / n;
    }
    fs_predictor_free(p);
    free(hs);

    FsTranslator *tr = fs_translator_open(argv[4], NULL);
    if (!tr) return fail("fs_translator_open");
    static char *john[10000];
    int n_john = read_lines(argv[5], john, 10000);
    if (n_john < 0) return fail(argv[5]);
    FsTranslateOptions opts = fs_translate_options_default();
    double *seconds = malloc(sizeof(double) * (size_t)rounds);
    unsigned long long chars = 0;
    for (int r = 0; r < rounds; r++) {
        double t = now();
        for (int i = 0; i < n_john; i += LINES) {
            int m = n_john - i < LINES ? n_john - i : LINES;
            FsTranslations *out = NULL;
            int c = fs_translate(tr, (const char *const *)(john + i), (size_t)m, &opts, &out);
            if (c < 0) return fail("fs_translate");
            for (int j = 0; j < c; j++) chars += strlen(fs_translations_get(out, (size_t)j)->text);
            fs_translations_free(out);
        }
        seconds[r] = now() - t;
    }
    for (int l = 0; l < n_john; l++) free(john[l]);
    fs_translator_free(tr);
    printf("{\"path\": \"c\", \"contexts\": %d, \"batch1_us\": %.3f, \"batch64_us\": %.3f, \"john_s\": %.4f, \"checksum\": %llu, \"john_chars\": %llu}\n",
           n, median(one, rounds), median(many, rounds), median(seconds, rounds),
           checksum / (unsigned long long)rounds, chars / (unsigned long long)rounds);
    free(one);
    free(many);
    free(seconds);
    return 0;
}
