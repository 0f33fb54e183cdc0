/* Holds one pattern in ymm0-ymm7 and checks them nonstop, in one asm loop, for argv[1] seconds; then
 * prints whether they kept it. A thread made to call dlopen through ptrace runs glibc's AVX string
 * functions there: unless the caller puts back the whole extended register state, these registers
 * come back changed (pyinjector's route: 8 runs in 10 here). */
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static volatile int stop;
static void on_alarm(int s) {
    (void)s;
    stop = 1;
}
int main(int argc, char **argv) {
    static const unsigned char pattern[32]
        __attribute__((aligned(32))) = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                        17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
    signal(SIGALRM, on_alarm);
    alarm(argc > 1 ? atoi(argv[1]) : 2);
    printf("go %d\n", (int)getpid());
    fflush(stdout);
    long bad = 0;
    __asm__ volatile(
        "vmovdqa (%[pat]), %%ymm0\n"
        "vmovdqa %%ymm0, %%ymm1\n vmovdqa %%ymm0, %%ymm2\n vmovdqa %%ymm0, %%ymm3\n"
        "vmovdqa %%ymm0, %%ymm4\n vmovdqa %%ymm0, %%ymm5\n vmovdqa %%ymm0, %%ymm6\n vmovdqa %%ymm0, %%ymm7\n"
        "1:\n"
        "vpxor (%[pat]), %%ymm0, %%ymm8\n vptest %%ymm8, %%ymm8\n jnz 2f\n"
        "vpxor %%ymm0, %%ymm1, %%ymm8\n vptest %%ymm8, %%ymm8\n jnz 2f\n"
        "vpxor %%ymm0, %%ymm2, %%ymm8\n vptest %%ymm8, %%ymm8\n jnz 2f\n"
        "vpxor %%ymm0, %%ymm3, %%ymm8\n vptest %%ymm8, %%ymm8\n jnz 2f\n"
        "vpxor %%ymm0, %%ymm4, %%ymm8\n vptest %%ymm8, %%ymm8\n jnz 2f\n"
        "vpxor %%ymm0, %%ymm5, %%ymm8\n vptest %%ymm8, %%ymm8\n jnz 2f\n"
        "vpxor %%ymm0, %%ymm6, %%ymm8\n vptest %%ymm8, %%ymm8\n jnz 2f\n"
        "vpxor %%ymm0, %%ymm7, %%ymm8\n vptest %%ymm8, %%ymm8\n jnz 2f\n"
        "cmpl $0, (%[stop])\n je 1b\n jmp 3f\n"
        "2:\n movq $1, %[bad]\n"
        "3:\n vzeroupper\n"
        : [bad] "+r"(bad)
        : [pat] "r"(pattern), [stop] "r"(&stop)
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "cc", "memory");
    printf(bad ? "vector registers changed\n" : "vector registers kept\n");
    return bad ? 1 : 0;
}
