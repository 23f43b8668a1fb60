#ifndef TOURPACK_CCURL_SHIMS_H
#define TOURPACK_CCURL_SHIMS_H
#include <curl/curl.h>

// curl_easy_setopt is variadic; Swift cannot call C variadics, so each
// argument type gets a fixed-arity wrapper.
CURLcode tp_curl_easy_setopt_long(CURL *handle, CURLoption option, long value);
// Variadic curl_easy_setopt, for string and pointer arguments.
CURLcode tp_curl_easy_setopt_ptr(CURL *handle, CURLoption option, const void *value);
// Variadic curl_easy_setopt, for 64-bit size arguments (curl_off_t).
CURLcode tp_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
// Variadic curl_easy_setopt, for the write callback's function pointer type.
CURLcode tp_curl_easy_setopt_write_function(CURL *handle, size_t (*callback)(char *, size_t, size_t, void *));
// Variadic curl_easy_setopt, for the header callback's function pointer type.
CURLcode tp_curl_easy_setopt_header_function(CURL *handle, size_t (*callback)(char *, size_t, size_t, void *));
// curl_easy_getinfo is variadic; this reads a long (e.g. the response code).
CURLcode tp_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
// curl_multi_setopt is variadic too.
CURLMcode tp_curl_multi_setopt_long(CURLM *handle, CURLMoption option, long value);

#endif
