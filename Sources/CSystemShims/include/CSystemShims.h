#ifndef C_SYSTEM_SHIMS_H
#define C_SYSTEM_SHIMS_H

/// Swaps two paths atomically with renameat2(RENAME_EXCHANGE): both must
/// exist; afterwards each name holds what the other did. Returns 0, or -1
/// with errno set (EINVAL or ENOSYS where the kernel or file system has no
/// such exchange). Swift cannot call renameat2 itself: glibc declares it
/// only under _GNU_SOURCE, and RENAME_EXCHANGE is a macro.
int tp_rename_exchange(int from_dirfd, const char *from, int to_dirfd, const char *to);

#endif
