# Debian packages, made by CPack from the build directory: `cpack -G DEB` there (or
# scripts/package.sh) writes <build>/packages/autopar_<version>_<arch>.deb, autopard_... and
# autopar-dev_....
#   autopar      the SPANK plugin, autopar-launch, the CLI, libautopar, the Python module, the man
#                pages, the examples (/usr/share/doc/autopar/examples) and the plugstack.conf.d
#                snippet (installed off)
#   autopard     the per-node daemon, its systemd unit and configuration, and their man pages
#   autopar-dev  libautopar's headers and its libautopar.so link
# Every package has its copyright file (etc/copyright.in: Apache-2.0) and compressed man pages.
# Options: AUTOPAR_PACKAGE_MAINTAINER (the Maintainer field), AUTOPAR_DEB_SLURM_DEPENDS (OFF for a
# site whose Slurm is its own build, not Debian's packages: autopar then does not depend on them).
# The packages hold the paths compiled into the programs (the unit's ExecStart, the launcher's
# autopar-nccl-check), so the build must be configured with -DCMAKE_INSTALL_PREFIX=/usr, as
# scripts/build.sh does; cpack refuses any other prefix.

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME autopar)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "${AUTOPAR_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}/packages")
# Absolute install destinations (Slurm's plugin directory, /etc) land in the package, not on this
# machine: CPack installs with DESTDIR into its staging tree.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
# RelWithDebInfo binaries without their debug sections (about a tenth of the size).
set(CPACK_STRIP_FILES ON)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL autopar autopard dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
# dpkg-shlibdeps adds the library packages the binaries link against (libpmix2, libslurm38, ...).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

# Slurm loads a SPANK plugin only when it was built for the same major.minor release (the
# plugin's SLURM_VERSION_NUMBER; spank(8)), so autopar depends on exactly that release of the
# package that owns the plugin directory and /etc/slurm/plugstack.conf.d.
file(STRINGS "${SLURM_INCLUDE_DIR}/slurm/slurm_version.h" _slurm_version_line
  REGEX "^#define SLURM_VERSION_NUMBER 0x[0-9a-fA-F]+")
string(REGEX REPLACE ".*0x([0-9a-fA-F][0-9a-fA-F])([0-9a-fA-F][0-9a-fA-F]).*" "\\1;\\2"
  _slurm_version_hex "${_slurm_version_line}")
list(GET _slurm_version_hex 0 _slurm_major)
list(GET _slurm_version_hex 1 _slurm_minor)
math(EXPR _slurm_major "0x${_slurm_major}")
math(EXPR _slurm_minor "0x${_slurm_minor}")
math(EXPR _slurm_next_minor "${_slurm_minor} + 1")
# dpkg compares digit runs as numbers: 22.5 is 22.05, so no zero padding is needed.
set(_slurm_release "${_slurm_major}.${_slurm_minor}")
set(_slurm_next "${_slurm_major}.${_slurm_next_minor}")

set(CPACK_DEBIAN_AUTOPAR_PACKAGE_NAME autopar)
set(CPACK_COMPONENT_AUTOPAR_DESCRIPTION
  "Slurm plugin for large-model training: parallel plans, checkpoints, recovery
autopar adds sbatch/srun options for the parallel layout (--auto-parallel), checkpoints
(--ckpt-dir, --ckpt-upload) and recovery from failures (--requeue-on-failure,
--heartbeat-timeout). This package holds the SPANK plugin (off until enabled in
/etc/slurm/plugstack.conf.d/autopar.conf), the per-task launcher autopar-launch, the
autopar CLI, libautopar and the Python module autopar.")
option(AUTOPAR_DEB_SLURM_DEPENDS
  "autopar depends on Debian's Slurm packages of the release it was built for (OFF: a site's own Slurm build)" ON)
if(AUTOPAR_DEB_SLURM_DEPENDS)
  set(CPACK_DEBIAN_AUTOPAR_PACKAGE_DEPENDS
    "slurm-wlm-basic-plugins (>= ${_slurm_release}), slurm-wlm-basic-plugins (<< ${_slurm_next}), python3")
else()
  set(CPACK_DEBIAN_AUTOPAR_PACKAGE_DEPENDS "python3")
endif()
# libautopar's NCCL API and autopar-nccl-check need NCCL and the CUDA runtime. They come from
# NVIDIA's repository, not Debian's main archive, and only programs that use that API load them
# (the plugin, launcher, CLI and daemon do not): recommended, named as NVIDIA's packages name them
# for the CUDA release this tree was built with.
if(AUTOPAR_HAVE_NCCL AND CUDAToolkit_VERSION_MAJOR)
  set(CPACK_DEBIAN_AUTOPAR_PACKAGE_RECOMMENDS
    "libnccl2, cuda-cudart-${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}")
endif()
# libautopar.so.N (autopar's only shared library): a shlibs file, so programs packaged against it
# depend on this package.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME autopar-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "autopar's C and C++ headers, to build programs against libautopar
The C API (autopar/autopar_c.h, autopar/ckpt_c.h) and the C++ NCCL bootstrap
(autopar/nccl.h) of libautopar, and its libautopar.so link.")
set(CPACK_COMPONENT_DEV_DEPENDS autopar)

set(CPACK_DEBIAN_AUTOPARD_PACKAGE_NAME autopard)
set(CPACK_COMPONENT_AUTOPARD_DESCRIPTION
  "autopar's per-node checkpoint and health service
autopard runs on every Slurm node beside slurmd: it commits and uploads the checkpoints of
autopar jobs, keeps each job's timeline and watches its health. Installed stopped: configure
/etc/autopar/autopard.conf, then run systemctl enable --now autopard.")
# The daemon speaks one protocol version with the plugin, launcher and library of its own release,
# so autopard depends on autopar of the same version (CPack writes "autopar (= VERSION)").
set(CPACK_COMPONENT_AUTOPARD_DEPENDS autopar)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

# conffiles: every file under /etc, so dpkg keeps an admin's edits on upgrade and `dpkg -r`, and
# removes them only on purge.
set(_deb_dir "${PROJECT_BINARY_DIR}/debian")
file(WRITE "${_deb_dir}/autopar/conffiles"
  "${CMAKE_INSTALL_FULL_SYSCONFDIR}/slurm/plugstack.conf.d/autopar.conf\n")
file(WRITE "${_deb_dir}/autopard/conffiles" "${AUTOPAR_ETC_DIR}/autopard.conf\n")
# The maintainer scripts (cmake/debian/PACKAGE/): their paths are the /usr prefix's, the only one
# cpack accepts (below). autopar's replace the ldconfig-only ones CPack would write.
foreach(component autopar autopard)
  string(TOUPPER ${component} _upper)
  set(CPACK_DEBIAN_${_upper}_PACKAGE_CONTROL_EXTRA "${_deb_dir}/${component}/conffiles")
  foreach(script postinst prerm postrm)
    list(APPEND CPACK_DEBIAN_${_upper}_PACKAGE_CONTROL_EXTRA
      "${PROJECT_SOURCE_DIR}/cmake/debian/${component}/${script}")
  endforeach()
endforeach()
# Control files with the modes dpkg expects (0644, scripts 0755), whatever the checkout's umask.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# cpack reads this file when it runs: packages from another prefix would install programs that
# look for their files under that prefix.
set(CPACK_PROJECT_CONFIG_FILE "${_deb_dir}/check-prefix.cmake")
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  file(WRITE "${CPACK_PROJECT_CONFIG_FILE}" "")
else()
  file(WRITE "${CPACK_PROJECT_CONFIG_FILE}"
    "message(FATAL_ERROR \"autopar: the packages need a build configured with -DCMAKE_INSTALL_PREFIX=/usr (this one: ${CMAKE_INSTALL_PREFIX}); run scripts/build.sh\")\n")
endif()

include(CPack)
