# Included by each test driver's folder (tests/cuda_driver, tests/ze_driver): adds what the test
# drivers share, this folder, unless another driver added it already, so that acg_test_driver is
# defined.
if(NOT TARGET acg_test_driver_common)
    add_subdirectory(${CMAKE_CURRENT_LIST_DIR} ${CMAKE_CURRENT_BINARY_DIR}/../driver_common)
endif()
