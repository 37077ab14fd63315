// The shared event counters of the process `run` started (schema/event_counters.h), mapped at load.
#pragma once

#include "schema/event_counters.h"

namespace gmt::recorder {

// The counters file GMT_EVENT_COUNTERS names, mapped shared, when this is the process `run` started (an image an
// exec started in it counts on where the previous one stopped); nullptr otherwise, or when the file is not
// usable (the counts are then private and nothing is said about events lost at a kill).
schema::EventCounters* map_shared_event_counters();

}  // namespace gmt::recorder
