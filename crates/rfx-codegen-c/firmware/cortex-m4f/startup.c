/* The vector table and reset handler of a Cortex-M4F: copies .data, clears .bss, turns the
 * FPU on (the generated f32 code uses its registers) and calls main. Faults end the run
 * through semihosting with a failure status. No C library is linked. */
#include <stddef.h>
#include <stdint.h>

#include "semihost.h"

int main(void);

/* Symbols of the linker script. */
extern uint32_t __stack_top;
extern uint32_t __data_load, __data_start, __data_end;
extern uint32_t __bss_start, __bss_end;

/* Coprocessor Access Control Register: CP10 and CP11 (the FPU) at bits 20..23. */
#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)

void reset_handler(void);

void reset_handler(void)
{
    uint32_t *src = &__data_load;
    uint32_t *dst = &__data_start;
    while (dst < &__data_end) {
        *dst++ = *src++;
    }
    for (dst = &__bss_start; dst < &__bss_end; ++dst) {
        *dst = 0;
    }
    SCB_CPACR |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    semihost_exit(main() == 0);
}

static void fault_handler(void)
{
    semihost_write0("fault\n");
    semihost_exit(0);
}

/* The initial stack pointer, then the handlers of the reset and the system exceptions. */
struct vector_table {
    uint32_t *initial_sp;
    void (*handlers[15])(void);
};

__attribute__((section(".vectors"), used)) static const struct vector_table vectors = {
    &__stack_top,
    {
        reset_handler, /* Reset */
        fault_handler, /* NMI */
        fault_handler, /* HardFault */
        fault_handler, /* MemManage */
        fault_handler, /* BusFault */
        fault_handler, /* UsageFault */
        NULL, NULL, NULL, NULL,
        fault_handler, /* SVCall */
        fault_handler, /* DebugMonitor */
        NULL,
        fault_handler, /* PendSV */
        fault_handler, /* SysTick */
    },
};

/* GCC may turn loops that fill or copy arrays into calls to memset and memcpy, which every
 * freestanding C environment provides; here they are, written so that GCC cannot turn them
 * into calls to themselves. */
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void *memset(void *dst, int value, size_t n)
{
    unsigned char *d = dst;
    while (n--) {
        *d++ = (unsigned char)value;
    }
    return dst;
}

__attribute__((optimize("no-tree-loop-distribute-patterns"))) void *memcpy(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    while (n--) {
        *d++ = *s++;
    }
    return dst;
}
