#pragma once
#include "tt-metalium/mesh_device.hpp"
