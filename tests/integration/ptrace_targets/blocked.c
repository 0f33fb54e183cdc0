/* Blocked in one system call when the ptrace route's call comes: `read` (restarted by the kernel
 * with the same arguments) or `nanosleep` (restarted through restart_syscall, with the time left). It
 * prints what the call returned: a call cut short (-1, EINTR) or a sleep ended early is a defect. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    printf("go %d\n", (int)getpid());
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "read") == 0) {
        char c = 0;
        ssize_t n = read(0, &c, 1);
        printf("read %zd %s %c\n", n, n < 0 ? strerror(errno) : "ok", c);
    } else {
        double start = now();
        struct timespec t = {3, 0}; /* long enough for a call made on a loaded machine */
        int r = nanosleep(&t, NULL);
        printf("nanosleep %d %s %.2f\n", r, r ? strerror(errno) : "ok", now() - start);
    }
    return 0;
}
