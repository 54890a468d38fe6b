#pragma once
#include "tt_api_decls.hpp"
