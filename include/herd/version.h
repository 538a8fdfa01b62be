/* version.h — one version for herd and herd-agent; an agent of another
 * version is never used by a controller (see proto). */
#ifndef HERD_VERSION_H
#define HERD_VERSION_H

#define HERD_VERSION "0.1.0"

#endif
