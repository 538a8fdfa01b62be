/* pmix_modex.c — direct modex: a PMIx_Get for a process on another node
 * whose data no fence collected (issue 16).  Not served yet: refused. */
#include "pmix_int.h"

pmix_status_t pmix_up_direct_modex(const pmix_proc_t *proc,
				   const pmix_info_t info[], size_t ninfo,
				   pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
	(void)proc;
	(void)info;
	(void)ninfo;
	return pmix_refuse_modex(cbfunc, cbdata);
}
