#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "CSQLiteShims.h"

#define PREFIX "/descriptor/"

typedef struct {
    sqlite3_file base;
    int fd;
} DescriptorFile;

static sqlite3_vfs descriptor_vfs;
static sqlite3_vfs *default_vfs;

static int file_close(sqlite3_file *file) {
    DescriptorFile *f = (DescriptorFile *)file;
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    return SQLITE_OK;
}

static int file_read(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    DescriptorFile *f = (DescriptorFile *)file;
    char *out = buffer;
    int done = 0;
    while (done < amount) {
        ssize_t got = pread(f->fd, out + done, (size_t)(amount - done), (off_t)(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return SQLITE_IOERR_READ;
        if (got == 0) break;
        done += (int)got;
    }
    if (done < amount) {
        memset(out + done, 0, (size_t)(amount - done));
        return SQLITE_IOERR_SHORT_READ;
    }
    return SQLITE_OK;
}

static int file_write(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset) {
    (void)file; (void)buffer; (void)amount; (void)offset;
    return SQLITE_READONLY;
}

static int file_truncate(sqlite3_file *file, sqlite3_int64 size) {
    (void)file; (void)size;
    return SQLITE_READONLY;
}

static int file_sync(sqlite3_file *file, int flags) {
    (void)file; (void)flags;
    return SQLITE_OK;
}

static int file_size(sqlite3_file *file, sqlite3_int64 *size) {
    DescriptorFile *f = (DescriptorFile *)file;
    struct stat status;
    if (fstat(f->fd, &status) != 0) return SQLITE_IOERR_FSTAT;
    *size = (sqlite3_int64)status.st_size;
    return SQLITE_OK;
}

static int file_lock(sqlite3_file *file, int level) {
    (void)file; (void)level;
    return SQLITE_OK;
}

static int file_check_reserved_lock(sqlite3_file *file, int *reserved) {
    (void)file;
    *reserved = 0;
    return SQLITE_OK;
}

static int file_control(sqlite3_file *file, int op, void *argument) {
    (void)file; (void)op; (void)argument;
    return SQLITE_NOTFOUND;
}

static int file_sector_size(sqlite3_file *file) {
    (void)file;
    return 4096;
}

static int file_device_characteristics(sqlite3_file *file) {
    (void)file;
    return SQLITE_IOCAP_IMMUTABLE;
}

static const sqlite3_io_methods descriptor_methods = {
    1, file_close, file_read, file_write, file_truncate, file_sync, file_size, file_lock, file_lock,
    file_check_reserved_lock, file_control, file_sector_size, file_device_characteristics,
};

/// The descriptor a name `/descriptor/<n>` names, or -1.
static int descriptor_of(const char *name) {
    if (name == NULL || strncmp(name, PREFIX, strlen(PREFIX)) != 0) return -1;
    const char *digits = name + strlen(PREFIX);
    if (*digits == 0) return -1;
    long value = 0;
    for (const char *c = digits; *c; c++) {
        if (*c < '0' || *c > '9' || value > 1000000000L) return -1;
        value = value * 10 + (*c - '0');
    }
    return (int)value;
}

static int vfs_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out_flags) {
    (void)vfs;
    if (!(flags & SQLITE_OPEN_MAIN_DB)) {
        return default_vfs->xOpen(default_vfs, name, file, flags, out_flags);
    }
    DescriptorFile *f = (DescriptorFile *)file;
    memset(f, 0, sizeof(*f));
    f->fd = -1;
    if (flags & (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) return SQLITE_CANTOPEN;
    int source = descriptor_of(name);
    if (source < 0) return SQLITE_CANTOPEN;
    int fd = dup(source);
    if (fd < 0) return SQLITE_CANTOPEN;
    f->fd = fd;
    f->base.pMethods = &descriptor_methods;
    if (out_flags) *out_flags = SQLITE_OPEN_READONLY;
    return SQLITE_OK;
}

static int vfs_delete(sqlite3_vfs *vfs, const char *name, int sync_dir) {
    (void)vfs; (void)name; (void)sync_dir;
    return SQLITE_IOERR_DELETE;
}

static int vfs_access(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    (void)vfs; (void)name; (void)flags;
    // No journal, WAL or anything else exists beside a descriptor.
    *result = 0;
    return SQLITE_OK;
}

static int vfs_full_pathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    size_t length = strlen(name);
    if ((int)length + 1 > size) return SQLITE_CANTOPEN;
    memcpy(out, name, length + 1);
    return SQLITE_OK;
}

static void *vfs_dl_open(sqlite3_vfs *vfs, const char *name) {
    (void)vfs; (void)name;
    return NULL;
}

static void vfs_dl_error(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    if (size > 0) out[0] = 0;
}

static void (*vfs_dl_sym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) {
    (void)vfs; (void)handle; (void)symbol;
    return NULL;
}

static void vfs_dl_close(sqlite3_vfs *vfs, void *handle) {
    (void)vfs; (void)handle;
}

static int vfs_randomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return default_vfs->xRandomness(default_vfs, size, out);
}

static int vfs_sleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return default_vfs->xSleep(default_vfs, microseconds);
}

static int vfs_current_time(sqlite3_vfs *vfs, double *now) {
    (void)vfs;
    return default_vfs->xCurrentTime(default_vfs, now);
}

static int vfs_get_last_error(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    if (size > 0) out[0] = 0;
    return 0;
}

static pthread_once_t registration = PTHREAD_ONCE_INIT;
static int registration_result = SQLITE_ERROR;

static void register_once(void) {
    default_vfs = sqlite3_vfs_find(NULL);
    if (default_vfs == NULL) return;
    int size = default_vfs->szOsFile > (int)sizeof(DescriptorFile) ? default_vfs->szOsFile : (int)sizeof(DescriptorFile);
    descriptor_vfs.iVersion = 1;
    descriptor_vfs.szOsFile = size;
    descriptor_vfs.mxPathname = 4096;
    descriptor_vfs.zName = TP_SQLITE_DESCRIPTOR_VFS;
    descriptor_vfs.xOpen = vfs_open;
    descriptor_vfs.xDelete = vfs_delete;
    descriptor_vfs.xAccess = vfs_access;
    descriptor_vfs.xFullPathname = vfs_full_pathname;
    descriptor_vfs.xDlOpen = vfs_dl_open;
    descriptor_vfs.xDlError = vfs_dl_error;
    descriptor_vfs.xDlSym = vfs_dl_sym;
    descriptor_vfs.xDlClose = vfs_dl_close;
    descriptor_vfs.xRandomness = vfs_randomness;
    descriptor_vfs.xSleep = vfs_sleep;
    descriptor_vfs.xCurrentTime = vfs_current_time;
    descriptor_vfs.xGetLastError = vfs_get_last_error;
    registration_result = sqlite3_vfs_register(&descriptor_vfs, 0);
}

int tp_sqlite_register_descriptor_vfs(void) {
    pthread_once(&registration, register_once);
    return registration_result;
}

static long long monotonic_milliseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static int past_deadline(void *context) {
    return monotonic_milliseconds() > (long long)(intptr_t)context ? 1 : 0;
}

void tp_sqlite_set_time_limit(void *connection, long long milliseconds) {
    if (milliseconds <= 0) {
        sqlite3_progress_handler((sqlite3 *)connection, 0, NULL, NULL);
        return;
    }
    long long deadline = monotonic_milliseconds() + milliseconds;
    sqlite3_progress_handler((sqlite3 *)connection, 1000, past_deadline, (void *)(intptr_t)deadline);
}

void tp_sqlite_limit_length(void *connection, int bytes) {
    sqlite3_limit((sqlite3 *)connection, SQLITE_LIMIT_LENGTH, bytes);
}
