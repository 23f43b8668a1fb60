#include "CFFmpegShims.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <libavutil/log.h>

int tp_averror(int posix_errno) { return AVERROR(posix_errno); }
int tp_averror_eof(void) { return AVERROR_EOF; }
int tp_averror_eagain(void) { return AVERROR(EAGAIN); }
int tp_averror_encoder_not_found(void) { return AVERROR_ENCODER_NOT_FOUND; }
int tp_averror_decoder_not_found(void) { return AVERROR_DECODER_NOT_FOUND; }
int tp_averror_stream_not_found(void) { return AVERROR_STREAM_NOT_FOUND; }
int tp_averror_option_not_found(void) { return AVERROR_OPTION_NOT_FOUND; }
void tp_channel_layout_mono(AVChannelLayout *layout) {
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
    *layout = mono;
}
void tp_av_strerror(int errnum, char *buffer, size_t size) {
    if (av_strerror(errnum, buffer, size) < 0) {
        snprintf(buffer, size, "unknown FFmpeg error %d", errnum);
    }
}

#define TP_KEPT_MESSAGES 8
#define TP_MESSAGE_SIZE 256
static _Thread_local int tp_capturing;
static _Thread_local int tp_captured_count;
static _Thread_local char tp_captured[TP_KEPT_MESSAGES][TP_MESSAGE_SIZE];

static void tp_log_callback(void *context, int level, const char *format, va_list arguments) {
    // Outside a capture FFmpeg's lines ("[flac @ 0x…] CRC error") never
    // reach the user's terminal: tourpack reports failures in its own words,
    // from the return codes and the captured messages.
    if (!tp_capturing) return;
    if (level > AV_LOG_ERROR) return;
    if (tp_captured_count < TP_KEPT_MESSAGES) {
        char *slot = tp_captured[tp_captured_count];
        int prefix = 1;
        av_log_format_line2(context, level, format, arguments, slot, TP_MESSAGE_SIZE, &prefix);
        size_t length = strlen(slot);
        while (length > 0 && (slot[length - 1] == '\n' || slot[length - 1] == '\r')) slot[--length] = 0;
    }
    tp_captured_count++;
}

// Called once, by the loader, with the real av_log_set_callback: av_log
// goes through tourpack's callback from FFmpeg's first call on, so what is
// not captured is dropped.
void tp_log_install_loaded(void (*set_callback)(void (*)(void *, int, const char *, va_list))) {
    set_callback(tp_log_callback);
}

void tp_log_capture_begin(void) {
    tp_capturing = 1;
    tp_captured_count = 0;
}

int tp_log_capture_end(void) {
    tp_capturing = 0;
    return tp_captured_count;
}

int tp_log_captured_message(int index, char *buffer, size_t size) {
    if (index < 0 || index >= tp_captured_count || index >= TP_KEPT_MESSAGES || size == 0) return 0;
    snprintf(buffer, size, "%s", tp_captured[index]);
    return 1;
}
