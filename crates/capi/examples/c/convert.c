/* The input method from C: type romaji key by key as a keyboard would, show the preedit and
 * the candidate window, pick, and commit. Each argument is typed, then converted (Space) and
 * committed (Enter); `-` opens the window on the first segment and picks its second candidate.
 *
 *   cc -o convert crates/capi/examples/c/convert.c -Icrates/capi/include \
 *      target/release/libfastsoftmax_c.a -lm -lpthread -ldl
 *   ./convert assets/models/ime-ja kyouhaiitenki
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastsoftmax.h"

static int fail(const char *what) {
    const char *why = fs_last_error();
    fprintf(stderr, "%s: %s\n", what, why ? why : "(no message)");
    return 1;
}

/* Text `what` (item i) of the input method, in a buffer the caller frees; NULL on failure. */
static char *text(FsIme *ime, FsImeText what, size_t i) {
    int len = fs_ime_text(ime, what, i, NULL, 0); /* length 0: how long it is */
    if (len < 0) return NULL;
    char *buf = malloc((size_t)len + 1);
    if (buf && fs_ime_text(ime, what, i, buf, (size_t)len + 1) < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int press(FsIme *ime, FsKey key, uint32_t value) {
    return fs_ime_key(ime, key, value) < 0 ? fail("fs_ime_key") : 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s CONVERTER_DIR ROMAJI [-] [ROMAJI…]\n", argv[0]);
        return 2;
    }
    FsIme *ime = fs_ime_open(argv[1], NULL); /* no user folder: nothing learned is saved */
    if (!ime) return fail("fs_ime_open");
    int status = 0;
    for (int a = 2; a < argc && status == 0; a++) {
        int pick_second = strcmp(argv[a], "-") == 0;
        if (pick_second && ++a == argc) break;
        for (const char *c = argv[a]; *c && status == 0; c++) /* ASCII romaji */
            status = press(ime, FS_KEY_CHAR, (uint32_t)(unsigned char)*c);
        if (status == 0) status = press(ime, FS_KEY_SPACE, 0); /* convert */
        if (status == 0 && pick_second) {
            status = press(ime, FS_KEY_SPACE, 0); /* the window opens on the next candidate */
            FsImeState s;
            if (status == 0 && fs_ime_state(ime, &s) < 0) status = fail("fs_ime_state");
            if (status == 0) {
                for (size_t i = 0; i < s.candidates; i++) {
                    char *c = text(ime, FS_IME_CANDIDATE, i);
                    if (!c) {
                        status = fail("fs_ime_text");
                        break;
                    }
                    printf("%c %zu %s\n", (int)i == s.highlighted ? '*' : ' ', i + 1, c);
                    free(c);
                }
            }
            if (status == 0) status = press(ime, FS_KEY_CHAR, '2'); /* pick the second */
        }
        if (status == 0) {
            char *preedit = text(ime, FS_IME_PREEDIT, 0);
            if (!preedit) status = fail("fs_ime_text");
            else {
                printf("preedit: %s\n", preedit);
                free(preedit);
            }
        }
        if (status == 0 && fs_ime_commit(ime) < 0) status = fail("fs_ime_commit");
        if (status == 0) {
            char *committed = text(ime, FS_IME_COMMITTED, 0);
            if (!committed) status = fail("fs_ime_text");
            else {
                printf("%s\n", committed);
                free(committed);
            }
        }
    }
    /* A bad call: a key the header does not define is refused, not undefined. */
    if (status == 0 && fs_ime_key(ime, (FsKey)99, 0) != FS_ERROR_ARGUMENT) {
        fprintf(stderr, "key 99 was accepted\n");
        status = 1;
    }
    fs_ime_free(ime);
    return status;
}
