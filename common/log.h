/* Logging to stderr (which systemd sends to the journal). */
#ifndef IOT_LOG_H
#define IOT_LOG_H

enum iot_log_level { IOT_LOG_ERROR = 0, IOT_LOG_WARN, IOT_LOG_INFO, IOT_LOG_DEBUG };

void iot_log_init(const char *program, enum iot_log_level level);
/* Parses "error", "warn", "info", "debug"; -1 if unknown. */
int iot_log_parse_level(const char *name);
void iot_log_set_level(enum iot_log_level level);
/* Whether messages of this level are written (to skip work done only for them). */
int iot_log_enabled(enum iot_log_level level);
void iot_log(enum iot_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define iot_err(...) iot_log(IOT_LOG_ERROR, __VA_ARGS__)
#define iot_warn(...) iot_log(IOT_LOG_WARN, __VA_ARGS__)
#define iot_info(...) iot_log(IOT_LOG_INFO, __VA_ARGS__)
#define iot_debug(...) iot_log(IOT_LOG_DEBUG, __VA_ARGS__)

#endif
