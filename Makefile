# nodepoold: one strict Makefile.
#
#   make                      build every binary into $(BUILD)/bin
#   make check                build and run every test (unit, process, fuzz smoke)
#   make check SANITIZE=address,undefined
#                             the same under ASan+UBSan (own build dir)
#   make demo                 the main job: ZooKeeper (TLS), nodepoold, a request served
#   make demo CLOUD=openstack the same against the OpenStack simulator (tests/sim/openstack)
#   make demo CLOUD=azure     the same against the Azure simulator (tests/sim/azure)
#   make demo CLOUD=ibmvpc    the same against the IBM Cloud VPC simulator (tests/sim/ibmvpc)
#   make fuzz                 build the libFuzzer targets
#   make bench                build the benchmarks
#   make dib-smoke            a real image from diskimage-builder, uploaded to the
#                             fake cloud (root; not part of make check)
#   make install              binaries, man pages, examples (PREFIX, DESTDIR)
#   make man-lint             mandoc lint of man/ (part of make check)
#   make layers               the layering check: no include across a forbidden
#                             boundary (mk/layers.py; part of make check)
#
# Sources are discovered by folder, so a new module needs no Makefile edit:
#   lib/*/*.c protocol/*.c          -> libnp.a (shared by every binary)
#   drivers/*.c drivers/*/*.c       -> libdrivers.a
#   <dir>/*.c except <dir>/main.c   -> lib<dir>.a, <dir>/main.c -> the binary
#   tests/unit/test_*.c             -> one criterion binary each
#   tests/fuzz/fuzz_*.c             -> one libFuzzer binary each
#   bench/*.c                       -> one binary each

# The default goal is `all`, not the first rule the foreach below defines.
.DEFAULT_GOAL := all
SANITIZE ?=
PREFIX ?= /usr/local
DESTDIR ?=
comma := ,
ifeq ($(SANITIZE),)
BUILD ?= build
else
BUILD ?= build-$(subst $(comma),-,$(SANITIZE))
endif

CC ?= cc
ZKC := $(BUILD)/zkclient
# libcurl, libxml-2.0 and libssh give their headers only: lib/net/curl_dl.c,
# xml_dl.c and nodescan.c load them at run time (dlopen, lib/core/dynlib.h),
# so that a worker whose provider needs no HTTP and scans no host keys never
# maps them nor the ~35 libraries they pull in.
PKGS := libevent libevent_pthreads yaml-0.1 msgpack jansson openssl zlib
DL_PKGS := libcurl libxml-2.0 libssh

# Hardening by default, as dpkg-buildflags' hardening=+all gives it: a stack
# protector and fortified libc calls (-D_FORTIFY_SOURCE=2 needs -O2, which
# CFLAGS_BASE has). A value the caller passes in CPPFLAGS or CFLAGS (the
# .deb's, from dpkg-buildflags) wins over these. Sanitizer builds leave
# FORTIFY out: ASan intercepts the same calls and reports more.
HARDEN_CPPFLAGS := $(if $(SANITIZE)$(findstring _FORTIFY_SOURCE,$(CPPFLAGS) $(CFLAGS)),,\
	-D_FORTIFY_SOURCE=2)
HARDEN_CFLAGS := $(if $(findstring -fstack-protector,$(CFLAGS)),,-fstack-protector-strong)
CPPFLAGS += $(HARDEN_CPPFLAGS)
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -DTHREADED -DHAVE_OPENSSL_H -g -O2 \
	-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wno-unused-parameter -fno-omit-frame-pointer $(HARDEN_CFLAGS)
# The include path is the tree's root (and the ZooKeeper client): an
# include names its header from the root ("lib/zk/zk.h",
# "drivers/driver.h"), so the layer it comes from shows; mk/layers.py
# checks the layers, mk/qualify-includes.py writes such includes.
INCLUDES := -I. -I$(ZKC)/include
SANFLAGS := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-sanitize-recover=all)
CFLAGS += $(CFLAGS_BASE) $(SANFLAGS) $(INCLUDES) \
	$(shell pkg-config --cflags $(PKGS) $(DL_PKGS) 2>/dev/null)
# --as-needed (Debian's gcc adds it, except with -fsanitize; clang does
# not): a binary records only the libraries it calls, so nodepoold, which
# never talks to ZooKeeper, maps no OpenSSL, whichever compiler and build.
LDFLAGS += $(SANFLAGS) -Wl,--as-needed
# -z now (full RELRO with -z relro): every symbol is bound at start-up,
# none lazily later. Besides the hardening, a process's start-up trim
# (lib/core/memtrim.h) then leaves nothing for the dynamic loader to do:
# a lazy first call after it would fault ld.so and the libraries' symbol
# tables back in.
LDFLAGS += -Wl,-z,relro -Wl,-z,now
LDLIBS += $(ZKC)/lib/libzookeeper.a $(ZKC)/lib/libhashtable.a \
	$(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm

STAMP_DEPS := $(BUILD)/.deps-ok
STAMP_ZKC := $(ZKC)/lib/libzookeeper.a

# --- sources ---------------------------------------------------------------
NP_SRCS := $(wildcard lib/*/*.c protocol/*.c)
DRV_SRCS := $(wildcard drivers/*.c drivers/*/*.c)
# The driver traits table (lib/config/drvtraits.h): lib/config links
# against it, so programs built from objects rather than libnp.a (the
# fuzzers) add these; they name nothing but lib/config.
TRAITS_SRCS := drivers/traits.c $(wildcard drivers/*/traits.c)
BIN_DIRS := supervisor worker web builder cli/nodepool cli/nodepoolctl
BIN_NAME_supervisor := nodepoold
BIN_NAME_worker := nodepool-launcher
BIN_NAME_web := nodepool-web
BIN_NAME_builder := nodepool-builder
BIN_NAME_cli/nodepool := nodepool
BIN_NAME_cli/nodepoolctl := nodepoolctl

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

NP_LIB := $(BUILD)/lib/libnp.a
DRV_LIB := $(BUILD)/lib/libdrivers.a

# Binaries whose folder has a main.c; relinked when the C client is rebuilt.
define bin_rules
$(1)_MAIN := $(wildcard $(1)/main.c)
$(1)_SRCS := $(filter-out $(1)/main.c,$(wildcard $(1)/*.c))
$(1)_LIB := $$(if $$($(1)_SRCS),$(BUILD)/lib/lib$(subst /,_,$(1)).a)
ifneq ($$($(1)_LIB),)
$$($(1)_LIB): $$(call obj,$$($(1)_SRCS))
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^
ROLE_LIBS += $$($(1)_LIB)
endif
ifneq ($$($(1)_MAIN),)
BINS += $(BUILD)/bin/$(BIN_NAME_$(1))
# A group: libnp.a refers back to libdrivers.a (lib/config's driver traits
# table, np_drv_traits_table, is defined in drivers/traits.c).
$(BUILD)/bin/$(BIN_NAME_$(1)): $$(call obj,$$($(1)_MAIN)) $$($(1)_LIB) $(DRV_LIB) $(NP_LIB) $(STAMP_ZKC)
	@mkdir -p $$(@D)
	$$(CC) $$(LDFLAGS) -o $$@ $$(call obj,$$($(1)_MAIN)) \
		-Wl,--start-group $$($(1)_LIB) $(DRV_LIB) $(NP_LIB) -Wl,--end-group $$(LDLIBS)
endif
endef
$(foreach d,$(BIN_DIRS),$(eval $(call bin_rules,$(d))))

TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
TEST_SUPPORT := $(wildcard tests/support/*.c)
# kept: several test binaries link them
.SECONDARY: $(call obj,$(TEST_SUPPORT))
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))

.PHONY: all check layers demo fuzz fuzz-smoke bench clean deps zkclient install man-lint dib-smoke
all: $(BINS)

# --- dependencies: Debian packages and the TLS ZooKeeper client -------------
$(STAMP_DEPS): mk/deps.sh
	@mkdir -p $(@D)
	sh mk/deps.sh
	@touch $@
deps: $(STAMP_DEPS)

$(STAMP_ZKC): mk/zkclient.sh $(wildcard mk/zkclient-*.patch) | $(STAMP_DEPS)
	env -u CFLAGS -u CPPFLAGS -u LDFLAGS -u MAKEFLAGS sh mk/zkclient.sh $(ZKC)
	@touch $@
zkclient: $(STAMP_ZKC)

# --- compile -----------------------------------------------------------------
$(BUILD)/obj/%.o: %.c | $(STAMP_ZKC)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(NP_LIB): $(call obj,$(NP_SRCS))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(DRV_LIB): $(call obj,$(DRV_SRCS))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $(if $^,$^,)

# --- the status page's CSS and script, as C strings --------------------------
# lib/ops/statuspage.c includes build-gen/statuspage_assets.inc, made here
# from lib/ops/statuspage/*.css and *.js with sed: every line a C string
# literal. Shared by every build directory (the text does not depend on
# the flags).
STATUSPAGE_ASSETS := lib/ops/statuspage/status.css lib/ops/statuspage/status.js
c_lines = sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $(1)
build-gen/statuspage_assets.inc: $(STATUSPAGE_ASSETS) Makefile
	@mkdir -p $(@D)
	{ echo '/* made by make from $(STATUSPAGE_ASSETS) */'; \
	  echo 'static const char statuspage_css[] ='; $(call c_lines,lib/ops/statuspage/status.css); \
	  echo ';'; echo 'static const char statuspage_js[] ='; \
	  $(call c_lines,lib/ops/statuspage/status.js); echo ';'; } > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/lib/ops/statuspage.o build-fuzz/obj/lib/ops/statuspage.o: \
	build-gen/statuspage_assets.inc

# --- tests -------------------------------------------------------------------
ALL_LIBS = $(ROLE_LIBS) $(DRV_LIB) $(NP_LIB)
$(BUILD)/tests/%: tests/unit/%.c $(call obj,$(TEST_SUPPORT)) $(ALL_LIBS) $(STAMP_ZKC)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests/support $(LDFLAGS) -o $@ $< $(call obj,$(TEST_SUPPORT)) \
		-Wl,--start-group $(ALL_LIBS) -Wl,--end-group $(LDLIBS) -lcriterion

$(BUILD)/bench/%: bench/%.c $(ALL_LIBS) $(STAMP_ZKC)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -Wl,--start-group $(ALL_LIBS) -Wl,--end-group $(LDLIBS)

check: $(BINS) $(TEST_BINS) fuzz man-lint
	BUILD=$(BUILD) SANITIZE=$(SANITIZE) sh tests/run.sh

# The layers of the tree (mk/layers.py); make check runs it with its test.
layers:
	python3 mk/layers.py

bench: $(BENCH_BINS) $(BINS)

# --- fuzzing (clang + libFuzzer; always with ASan+UBSan) ---------------------
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,build-fuzz/%,$(FUZZ_SRCS))
FUZZ_CFLAGS := $(CFLAGS_BASE) -fsanitize=address,undefined $(INCLUDES) \
	$(shell pkg-config --cflags $(PKGS) $(DL_PKGS) 2>/dev/null)
FUZZ_OBJS := $(patsubst %.c,build-fuzz/obj/%.o,$(NP_SRCS) $(TRAITS_SRCS))
build-fuzz/obj/%.o: %.c | $(STAMP_ZKC)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<
build-fuzz/%: tests/fuzz/%.c $(FUZZ_OBJS) | $(STAMP_ZKC)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< $(FUZZ_OBJS) $(LDLIBS)
fuzz: $(FUZZ_BINS)
# Keep the objects: they are only reached through the pattern rule above.
.SECONDARY: $(FUZZ_OBJS)

# --- install and man pages (packaging/debian/rules calls install) ------------
install: all
	BUILD=$(BUILD) PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) sh packaging/install.sh

man-lint:
	sh tests/man-lint.sh

demo: $(BINS)
	BUILD=$(BUILD) CLOUD=$(CLOUD) sh tests/demo.sh

dib-smoke: $(BINS)
	BUILD=$(BUILD) sh tests/dib/smoke.sh

clean:
	rm -rf build build-* 

-include $(shell find $(BUILD)/obj build-fuzz/obj -name '*.d' 2>/dev/null)
# a fuzz target #includes the driver sources it fuzzes: rebuilt when they change
-include $(wildcard build-fuzz/*.d)
