/* LD_PRELOAD for the watchdog's tests: pidfd_open(2) fails with ENOSYS, as
 * on a kernel before Linux 5.3 (where pidfd_open first appeared) or under
 * a seccomp profile that refuses it. The agent calls it through libc's
 * syscall(3), which this interposes; every other number goes on to libc.
 * syscall(3) takes up to six register-sized arguments on Linux, so six
 * are passed on whatever the call gave. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/syscall.h>

long syscall(long n, ...);

long
syscall(long n, ...)
{
    static long (*next)(long, ...);
    long x[6];
    va_list ap;

    va_start(ap, n);
    for (int i = 0; i < 6; i++)
        x[i] = va_arg(ap, long);
    va_end(ap);
#ifdef SYS_pidfd_open
    if (n == SYS_pidfd_open) {
        errno = ENOSYS;
        return -1;
    }
#endif
    if (next == NULL)
        *(void **)&next = dlsym(RTLD_NEXT, "syscall");
    if (next == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return next(n, x[0], x[1], x[2], x[3], x[4], x[5]);
}
