#pragma once
#define TT_API_HOST 1
#include "tt_api_decls.hpp"
