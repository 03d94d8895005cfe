#include "semihost.h"

#define SYS_WRITE0 0x04
#define SYS_EXIT 0x18
/* SYS_EXIT's reasons on 32-bit Arm: the application exited, or a run-time error occurred. */
#define ADP_STOPPED_APPLICATION_EXIT 0x20026
#define ADP_STOPPED_RUN_TIME_ERROR 0x20023

static int semihost_call(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void semihost_write0(const char *text)
{
    (void)semihost_call(SYS_WRITE0, text);
}

void semihost_exit(int ok)
{
    /* On 32-bit Arm the argument is the reason code itself, not a pointer to a block. */
    int reason = ok ? ADP_STOPPED_APPLICATION_EXIT : ADP_STOPPED_RUN_TIME_ERROR;
    (void)semihost_call(SYS_EXIT, (const void *)reason);
    for (;;) {
    }
}
