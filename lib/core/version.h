/* The version every nodepoold program reports (components, --version). */
#ifndef NP_VERSION_H
#define NP_VERSION_H
#define NP_VERSION "0.1.0"
#endif
