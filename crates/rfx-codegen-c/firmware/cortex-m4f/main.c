/* A tilt-balancing loop on a Cortex-M4F: each step runs two exported rfx kernels, the
 * complementary filter `tilt_filter` (gyro and accelerometer -> tilt angle) and the PID step
 * `pid` (tilt angle -> motor command, with its integral state), and prints the step's values
 * as the bits of each float, so that a host can compare them with rfx's interpreter exactly.
 *
 * The sensor samples are made from the step number with exact arithmetic (small integers over
 * powers of two) in place of reading an IMU, so the run is the same everywhere. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pid.h"
#include "semihost.h"
#include "tilt_filter.h"

#define STEPS 64u

/* Work buffers where an exported function needs one (NAME_WORK_BYTES > 0); else NULL. */
#if TILT_FILTER_WORK_BYTES > 0
static unsigned char tilt_filter_work[TILT_FILTER_WORK_BYTES] __attribute__((aligned(TILT_FILTER_WORK_ALIGN)));
#define TILT_FILTER_WORK ((void *)tilt_filter_work)
#else
#define TILT_FILTER_WORK NULL
#endif
#if PID_WORK_BYTES > 0
static unsigned char pid_work[PID_WORK_BYTES] __attribute__((aligned(PID_WORK_ALIGN)));
#define PID_WORK ((void *)pid_work)
#else
#define PID_WORK NULL
#endif

/* The sensor model: gyro rate (rad/s), accelerometer y and z (in g), set point (rad). */
static float gyro_rate(uint32_t t) { return (float)((int32_t)((t * 37u) % 61u) - 30) / 64.0f; }
static float accel_y(uint32_t t) { return (float)((int32_t)((t * 13u) % 29u) - 14) / 256.0f; }
static float accel_z(uint32_t t) { return 1.0f - (float)(t % 5u) / 512.0f; }
static float setpoint(uint32_t t) { return t < STEPS / 2u ? 0.0f : 0.0625f; }

/* Appends `value`'s decimal digits (at most 10) to `p`; returns the end. */
static char *put_u32(char *p, uint32_t value)
{
    char digits[10];
    int n = 0;
    do {
        digits[n++] = (char)('0' + value % 10u);
        value /= 10u;
    } while (value != 0u);
    while (n > 0) {
        *p++ = digits[--n];
    }
    return p;
}

/* Appends ` label=` and the 8 hex digits of `value`'s bits to `p`; returns the end. */
static char *put_bits(char *p, const char *label, float value)
{
    static const char hex[] = "0123456789abcdef";
    uint32_t bits;
    int shift;
    memcpy(&bits, &value, sizeof bits);
    *p++ = ' ';
    while (*label != '\0') {
        *p++ = *label++;
    }
    *p++ = '=';
    for (shift = 28; shift >= 0; shift -= 4) {
        *p++ = hex[(bits >> shift) & 0xFu];
    }
    return p;
}

int main(void)
{
    float angle = 0.0f;
    float integral = 0.0f;
    uint32_t t;
    for (t = 0; t < STEPS; ++t) {
        const float gyro = gyro_rate(t), ay = accel_y(t), az = accel_z(t), target = setpoint(t);
        const float angle_prev = angle;
        float new_angle, command, new_integral;
        char line[96];
        char *p = line;
        if (tilt_filter(&angle_prev, &gyro, &ay, &az, &new_angle, TILT_FILTER_WORK) != 0
            || pid(&target, &new_angle, &angle_prev, &integral, &command, &new_integral, PID_WORK) != 0) {
            semihost_write0("an exported function returned an error\n");
            return 1;
        }
        angle = new_angle;
        integral = new_integral;
        *p++ = 't';
        *p++ = '=';
        p = put_u32(p, t);
        p = put_bits(p, "angle", angle);
        p = put_bits(p, "command", command);
        p = put_bits(p, "integral", integral);
        *p++ = '\n';
        *p = '\0';
        semihost_write0(line);
    }
    semihost_write0("done\n");
    return 0;
}
