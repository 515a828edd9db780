-- Payment methods used at least 100 times: an aggregate with HAVING.
select method, count(*) as payments, sum(amount) as amount
from {{ source('raw', 'payments') }}
group by method
having count(*) >= 100
