/* The entry of a test driver run on the Cortex-M4F under QEMU. The generated driver's `main`
 * is compiled as `driver_main` (-Dmain=driver_main); the example firmware's reset handler calls
 * this `main`, which opens newlib's semihosting stdio (librdimon), runs the driver and leaves
 * through `exit`, which flushes stdout and ends the run through semihosting with its status. */
#include <stdlib.h>

void initialise_monitor_handles(void);
int driver_main(void);
int main(void);
void _fini(void);

int main(void)
{
    initialise_monitor_handles();
    exit(driver_main());
}

/* `exit` runs the destructors' table, whose end hook the C runtime's startup files, not linked
 * here, would provide. */
void _fini(void)
{
}
