/* ARM semihosting: the debugger (here QEMU) carries out the request a `bkpt 0xab` makes. */
#ifndef SEMIHOST_H
#define SEMIHOST_H

/* Writes the NUL-terminated string `text` to the host's console (SYS_WRITE0). */
void semihost_write0(const char *text);

/* Ends the program (SYS_EXIT): QEMU exits with status 0 when `ok` is non-zero, else 1. */
void semihost_exit(int ok) __attribute__((noreturn));

#endif /* SEMIHOST_H */
