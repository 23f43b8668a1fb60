#include "CFFmpegShims.h"
#include <errno.h>
#include <stdio.h>

int tp_averror(int posix_errno) { return AVERROR(posix_errno); }
int tp_averror_eof(void) { return AVERROR_EOF; }
int tp_averror_eagain(void) { return AVERROR(EAGAIN); }
void tp_channel_layout_mono(AVChannelLayout *layout) {
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
    *layout = mono;
}
void tp_av_strerror(int errnum, char *buffer, size_t size) {
    if (av_strerror(errnum, buffer, size) < 0) {
        snprintf(buffer, size, "unknown FFmpeg error %d", errnum);
    }
}
