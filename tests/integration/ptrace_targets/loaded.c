/* Loaded by the ptrace route's call in the tests: it leaves a file named `loaded` in the process's
 * working directory, so that the test knows the call ran. */
#include <fcntl.h>
#include <unistd.h>

__attribute__((constructor)) static void mark_loaded(void) {
    int fd = open("loaded", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) close(fd);
}
