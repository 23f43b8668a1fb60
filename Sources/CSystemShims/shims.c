#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "CSystemShims.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

int tp_rename_exchange(int from_dirfd, const char *from, int to_dirfd, const char *to) {
#ifdef SYS_renameat2
    return (int)syscall(SYS_renameat2, from_dirfd, from, to_dirfd, to, RENAME_EXCHANGE);
#else
    errno = ENOSYS;
    return -1;
#endif
}
