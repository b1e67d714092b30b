// EventQueue is a header-only template; this unit instantiates it once so that template errors
// surface when the library builds, not first in a dependent target.
#include "exitsim/sim/event_queue.hpp"

template class exitsim::sim::EventQueue<int>;
